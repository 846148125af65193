"""3-D convolution and pooling (flow.nn.conv3d, max_pool3d, avg_pool3d, flow.layers.conv3d) against PyTorch.

Forward and gradients through test_composite_ops.py's `check`; OneFlow's SAME is SAME_LOWER (the larger half
of an odd total pad first), which PyTorch takes as explicit pads.
"""

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)
F = torch.nn.functional

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
from predict_jobs import on_one_device_and, run  # noqa: E402

check, values, FLOATS = _checks.check, _checks.values, _checks.FLOATS


def same_lower(size, kernel, strides, dilations):
    """PyTorch's F.pad argument (last axis first) for OneFlow's SAME over (d, h, w)."""
    pads = []
    for n, k, s, d in zip(size, kernel, strides, dilations):
        total = max((-(-n // s) - 1) * s + (k - 1) * d + 1 - n, 0)
        pads.append((total - total // 2, total // 2))
    return [p for lo_hi in reversed(pads) for p in lo_hi]


CONVS = [  # (input shape, filters shape, strides, padding, dilations, groups)
    ((2, 4, 5, 6, 7), (6, 2, 3, 2, 3), (2, 1, 2), "SAME", (1, 2, 1), 2),
    ((1, 3, 4, 4, 4), (2, 3, 1, 1, 1), 1, "VALID", None, 1),
    ((2, 2, 6, 5, 4), (3, 2, 3, 3, 3), (1, 2, 1), [(1, 2), (0, 1), (2, 0)], None, 1),
    ((1, 2, 3, 4, 5), (2, 2, 3, 2, 2), 1, "SAME", (2, 1, 1), 1),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, weight, strides, padding, dilations, groups", CONVS)
def test_conv3d_is_torchs_with_its_gradients(dtype, shape, weight, strides, padding, dilations, groups):
    x, w = values(dtype, shape=shape), values(dtype, shape=weight)
    s = (strides,) * 3 if isinstance(strides, int) else strides
    d = (1, 1, 1) if dilations is None else dilations
    pads = (same_lower(shape[2:], weight[2:], s, d) if padding == "SAME" else [0] * 6 if padding == "VALID"
            else [p for lo_hi in reversed(padding) for p in lo_hi])  # fmt: skip

    def theirs(t, k):
        return F.conv3d(F.pad(t, pads), k, stride=s, dilation=d, groups=groups)

    check(lambda a, b: flow.nn.conv3d(a, b, strides, padding, dilations=dilations, groups=groups), theirs, [x, w], dtype,
          atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


def test_conv3d_in_ndhwc_is_ncdhws_transposed():
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(2, 5, 4, 6, 3)).astype(np.float32), rng.normal(size=(4, 3, 2, 2, 3)).astype(np.float32)
    got = run(lambda a, b: flow.nn.conv3d(a, b, 1, "SAME", data_format="NDHWC"), x, w)
    first = F.conv3d(F.pad(torch.tensor(x).permute(0, 4, 1, 2, 3), same_lower((5, 4, 6), (3, 2, 2), (1,) * 3, (1,) * 3)),
                     torch.tensor(w).permute(0, 4, 1, 2, 3))  # fmt: skip
    np.testing.assert_allclose(got, first.permute(0, 2, 3, 4, 1).numpy(), rtol=1e-5, atol=1e-5)


POOLS = [  # (input shape, ksize, strides, padding)
    ((2, 3, 5, 6, 7), (3, 2, 3), (2, 2, 1), "SAME"),
    ((1, 2, 4, 4, 4), 2, 2, "VALID"),
    ((2, 2, 6, 5, 4), (3, 3, 2), 1, "SAME"),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, ksize, strides, padding", POOLS)
def test_max_pool3d_is_torchs_with_its_gradient(dtype, shape, ksize, strides, padding):
    x = values(dtype, shape=shape)  # distinct values: one maximum per window
    k = (ksize,) * 3 if isinstance(ksize, int) else ksize
    s = (strides,) * 3 if isinstance(strides, int) else strides
    pads = same_lower(shape[2:], k, s, (1, 1, 1)) if padding == "SAME" else [0] * 6
    check(lambda a: flow.nn.max_pool3d(a, ksize, strides, padding),
          lambda t: F.max_pool3d(F.pad(t, pads, value=-np.inf), k, s), [x], dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, ksize, strides, padding", POOLS)
def test_avg_pool3d_averages_what_is_in_bounds_with_torchs_gradient(dtype, shape, ksize, strides, padding):
    x = values(dtype, shape=shape)
    k = (ksize,) * 3 if isinstance(ksize, int) else ksize
    s = (strides,) * 3 if isinstance(strides, int) else strides
    pads = same_lower(shape[2:], k, s, (1, 1, 1)) if padding == "SAME" else [0] * 6

    def theirs(t):  # the window's sum over its count of elements in bounds
        inside = F.avg_pool3d(F.pad(torch.ones_like(t), pads), k, s)
        return F.avg_pool3d(F.pad(t, pads), k, s) / inside

    check(lambda a: flow.nn.avg_pool3d(a, ksize, strides, padding), theirs, [x], dtype)


def test_a_3d_convolution_layer_trains_as_torchs():
    """flow.layers.conv3d with a bias and a relu, then a pool and a mean, one SGD step against torch's."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 4, 5, 6))
    w0, b0 = rng.normal(size=(4, 3, 3, 3, 3)) * 0.2, rng.normal(size=(4,)) * 0.1
    config = flow.FunctionConfig()
    config.default_data_type(flow.double)

    @flow.global_function(type="train", function_config=config)
    def step(images: tp.Numpy.Placeholder(x.shape, dtype=flow.double)) -> tp.Numpy:
        y = flow.layers.conv3d(images, 4, 3, padding="SAME", activation=flow.nn.relu, name="c3")
        loss = flow.math.reduce_mean(flow.nn.max_pool3d(y, 2, 2, "VALID"))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
        return loss

    flow.load_variables({"c3-weight": w0, "c3-bias": b0})  # torch's initial values
    loss = step(x)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    want = F.max_pool3d(F.relu(F.conv3d(torch.tensor(x), tw, tb, padding=1)), 2, 2).mean()
    want.backward()
    np.testing.assert_allclose(loss, want.item(), rtol=1e-12)
    np.testing.assert_allclose(flow.get_all_variables()["c3-weight"].numpy(), w0 - 0.5 * tw.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(flow.get_all_variables()["c3-bias"].numpy(), b0 - 0.5 * tb.grad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("call, match", [
    (lambda a, b: flow.nn.conv3d(a, b, 1, "VALID", data_format="NCHW"), "data_format must be 'NCDHW' or 'NDHWC'"),
    (lambda a, b: flow.nn.conv3d(a, b, 1, "VALID", groups=3), "do not match"),
    (lambda a, b: flow.nn.conv3d(a, b, (1, 2), "VALID"), "strides must be an int or a list of three positive ints"),
    (lambda a, b: flow.nn.conv3d(a, b, -1, "VALID"), "strides must be an int or a list of three positive ints, got -1"),
    (lambda a, b: flow.nn.max_pool3d(a, 2, 0, "SAME"), "strides must be an int or a list of three positive ints, got 0"),
    (lambda a, b: flow.nn.max_pool3d(a, 5, 1, "VALID"), "the window reaches 5 along depth, more than the padded depth 3"),
])  # fmt: skip
def test_bad_3d_arguments_are_trace_errors_at_the_users_line(call, match):
    with pytest.raises(flow.TraceError, match=r"test_volumes.py:\d+.*" + match):
        run(call, np.zeros((1, 2, 3, 4, 4), np.float32), np.zeros((2, 2, 1, 1, 1), np.float32))


def test_a_3d_network_on_two_devices_is_one_devices():
    """Batch split over 2 devices: the 2-D ops' SBP rules carry the composed 3-D ones."""
    x = np.random.default_rng(6).normal(size=(4, 2, 4, 5, 5)).astype(np.float32)

    def train():
        @flow.global_function(type="train")
        def step(images: tp.Numpy.Placeholder(x.shape)) -> tp.Numpy:
            y = flow.layers.conv3d(images.with_distribute(flow.distribute.split(0)), 3, (2, 3, 3), padding="SAME",
                                   name="c", kernel_initializer=flow.random_normal_initializer(seed=1))  # fmt: skip
            loss = flow.math.reduce_mean(flow.nn.avg_pool3d(flow.nn.max_pool3d(y, 2, 1, "SAME"), 2, 2, "VALID"))
            flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0).minimize(loss)
            return loss

        losses = [step(x) for _ in range(2)]
        return losses, flow.get_all_variables()["c-weight"].numpy()

    one, two = on_one_device_and(2, train)
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5)
    np.testing.assert_allclose(two[1], one[1], rtol=1e-5, atol=1e-7)
