"""LAMB and LARS on a variable split over devices take the norms of the whole variable, as on one device.

Each device's update reads the squared norms of its piece's real entries summed
over the devices that split the variable (docs/training.md); uneven splits end
pieces in padding, which must not count. The oracle is OneFlow's formula
written in numpy, on the whole variable.
"""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

STEPS, BATCH, LR = 4, 4, 0.1
RATE = float(np.float32(LR))  # the rate the updates read is a float32 scalar, as OneFlow's
BETA1, BETA2, EPSILON = 0.9, 0.99, 1e-4
MOMENTUM, LARS_EPSILON, COEFFICIENT = 0.8, 1e-3, 0.5


def gradient(w: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    """loss = mean((x @ w - 1)**2) + 0.1 * sum(w) and its gradient: the sum's is 0.1 everywhere, so the
    gradient's broadcast term also fills the padding of each device's piece."""
    r = x @ w - 1.0
    return float(np.mean(r * r) + 0.1 * np.sum(w)), 2.0 * x.T @ r / r.size + 0.1


def numpy_lamb(w: np.ndarray, xs: np.ndarray, weight_decay: float) -> tuple[list[float], np.ndarray]:
    """OneFlow's LAMB: u = m_hat / sqrt(v_hat + epsilon); w -= lr * (|w| / |u|) * (u + weight_decay * w)."""
    m, v, losses = np.zeros_like(w), np.zeros_like(w), []
    for step, x in enumerate(xs, start=1):
        loss, g = gradient(w, x)
        losses.append(loss)
        m = BETA1 * m + (1 - BETA1) * g
        v = BETA2 * v + (1 - BETA2) * g * g
        u = (m / (1 - BETA1**step)) / np.sqrt(v / (1 - BETA2**step) + EPSILON)
        w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
        w = w - RATE * (w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0) * (u + weight_decay * w)
    return losses, w


def numpy_lars(w: np.ndarray, xs: np.ndarray, weight_decay: float) -> tuple[list[float], np.ndarray]:
    """OneFlow's LARS: local_lr = lr * coefficient * |w| / (epsilon + |g| + wd |w|); m = beta m - local_lr (g + wd w)."""
    m, losses = np.zeros_like(w), []
    for x in xs:
        loss, g = gradient(w, x)
        losses.append(loss)
        w_norm, g_norm = np.linalg.norm(w), np.linalg.norm(g)
        ratio = COEFFICIENT * w_norm / (LARS_EPSILON + g_norm + weight_decay * w_norm) if w_norm > 0 and g_norm > 0 else 1.0
        m = MOMENTUM * m - RATE * ratio * (g + weight_decay * w)
        w = w + m
    return losses, w


ORACLES = {"lamb": numpy_lamb, "lars": numpy_lars}


def optimizer(kind: str, weight_decay: float) -> flow.optimizer.Optimizer:
    schedule = flow.optimizer.PiecewiseConstantScheduler([], [LR])
    if kind == "lamb":
        return flow.optimizer.LAMB(schedule, BETA1, BETA2, EPSILON, weight_decay=weight_decay)
    return flow.optimizer.LARS(schedule, MOMENTUM, LARS_EPSILON, COEFFICIENT, weight_decay=weight_decay)


def train(kind: str, shape: tuple[int, int], distribute, weight_decay: float, devices: int = 1,
          hierarchy: list[int] | None = None, scopes: tuple[str, str] | None = None,
          ) -> tuple[list[float], np.ndarray, str, np.ndarray]:  # fmt: skip
    """STEPS steps of the job; its losses, the variable after them, the lowered IR and the initial variable.
    `scopes`: the variable and its matmul on the first placement, the rest of the loss on the second."""
    flow.config.cpu_device_num(devices)
    first, then = scopes or (f"0:0-{devices - 1}",) * 2

    @flow.global_function(type="train")
    def step(x: tp.Numpy.Placeholder((BATCH, shape[0]), dtype=flow.float64)) -> tp.Numpy:
        with flow.scope.placement("cpu", first, hierarchy=hierarchy):
            w = flow.get_variable("w", shape=shape, dtype=flow.float64, distribute=distribute)
            r = flow.matmul(x, w) - 1.0
        with flow.scope.placement("cpu", then, hierarchy=hierarchy):
            loss = flow.math.reduce_mean(flow.math.square(r)) + 0.1 * flow.math.reduce_sum(w)
            optimizer(kind, weight_decay).minimize(loss)
        return loss

    rng = np.random.default_rng(7)
    w0 = rng.standard_normal(shape)
    flow.load_variables({"w": w0})
    losses = [float(step(x)) for x in rng.standard_normal((STEPS, BATCH, shape[0]))]
    return losses, flow.get_all_variables()["w"].numpy(), step.ir("lower-to-physical"), w0


def expected(kind: str, shape: tuple[int, int], weight_decay: float, w0: np.ndarray) -> tuple[list[float], np.ndarray]:
    xs = np.random.default_rng(7)
    xs.standard_normal(shape)  # the draws `train` made for w0
    return ORACLES[kind](w0, xs.standard_normal((STEPS, BATCH, shape[0])), weight_decay)


def check(kind: str, shape: tuple[int, int], weight_decay: float, result) -> None:
    losses, w, ir, w0 = result
    want_losses, want_w = expected(kind, shape, weight_decay, w0)
    assert f"job.{kind}_norms" in ir and "job.all_reduce" in ir  # the split path, not a gathered variable
    np.testing.assert_allclose(losses, want_losses, rtol=1e-10)
    np.testing.assert_allclose(w, want_w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1], ids=["no-decay", "decay"])
@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("kind", ["lamb", "lars"])
def test_split_variable_trains_as_the_whole_one(kind, axis, devices, weight_decay):
    """5 entries along the split axis: uneven on 2 and 3 devices (the last piece padded)."""
    shape = (5, 3) if axis == 0 else (3, 5)
    check(kind, shape, weight_decay, train(kind, shape, flow.distribute.split(axis), weight_decay, devices))


@pytest.mark.parametrize("kind", ["lamb", "lars"])
def test_broadcast_and_one_device_keep_the_whole_variables_norms(kind):
    """No norms op: a broadcast variable's update takes them of what each device holds, all of it."""
    for devices, distribute in ((1, None), (2, flow.distribute.broadcast())):
        flow.clear_default_session()
        losses, w, ir, w0 = train(kind, (5, 3), distribute, 0.1, devices)
        assert f"job.{kind}_norms" not in ir
        want_losses, want_w = expected(kind, (5, 3), 0.1, w0)
        np.testing.assert_allclose(losses, want_losses, rtol=1e-10)
        np.testing.assert_allclose(w, want_w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "layout",
    [["S0", "S1"], ["S0", "B"], ["B", "S1"], ["S0", "S0"]],
    ids=lambda layout: "-".join(layout),
)
@pytest.mark.parametrize("kind", ["lamb", "lars"])
def test_split_on_a_2x2_mesh_sums_the_norms_over_the_axes_that_split_it(kind, layout):
    """5 x 5 on a 2x2 mesh: split on one mesh axis (the other holds copies: their norms must not add up),
    on both along different tensor axes, or along one tensor axis twice (pieces of 2 rows of 3, then 5)."""
    distribute = [flow.distribute.split(int(c[1])) if c[0] == "S" else flow.distribute.broadcast() for c in layout]
    result = train(kind, (5, 5), distribute, 0.1, 4, hierarchy=[2, 2])
    check(kind, (5, 5), 0.1, result)
    norms = next(line for line in result[2].splitlines() if f"job.{kind}_norms" in line)
    partial = ", ".join("partial_sum" if c[0] == "S" else "broadcast" for c in layout)
    assert f"sbp = #job.nd_sbp<[{partial}]>" in norms


@pytest.mark.parametrize("kind", ["lamb", "lars"])
def test_a_variable_on_part_of_the_devices_sums_its_norms_there(kind):
    """The variable split over devices 1-3 of 4 (5 rows: pieces of 2, 2 and 1), the loss on devices 0-1: the
    norms are all-reduced among the variable's own devices."""
    result = train(kind, (5, 3), flow.distribute.split(0), 0.1, 4, scopes=("0:1-3", "0:0-1"))
    check(kind, (5, 3), 0.1, result)
    norms = next(line for line in result[2].splitlines() if f"job.{kind}_norms" in line)
    assert 'placement = #job.placement<cpu, ["0:1-3"]>' in norms
