"""flow.nn.GroupNorm, InstanceNorm1d/2d/3d, PixelShuffle and PixelShufflev2 against PyTorch.

Forward and input gradient through test_composite_ops.py's `check` (a train job watching the
gradient of sum(out * cotangent), against PyTorch's autograd); then momentum-SGD steps that
train the functions' own variables, against torch.optim.SGD, on one device and on two.
"""


import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle; skipped where PyTorch is not installed (CI installs it)
F = torch.nn.functional

import test_composite_ops as _checks  # on pytest's pythonpath (pyproject.toml)
values, FLOATS, tol = _checks.values, _checks.FLOATS, _checks.tol


def check(*args, **kwargs):
    """test_composite_ops.py's `check` in a session of its own: its train job steps the variables it makes."""
    flow.clear_default_session()
    return _checks.check(*args, **kwargs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 4), 3), ((3, 4, 5), 2), ((2, 4, 2, 3, 2), 4), ((2, 6, 5), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dtype, shape, groups, affine):
    """With affine, gamma and beta start at ones and zeros: the same forward, and the input's gradient through them."""
    x = values(dtype, shape=shape) + 4.0
    check(lambda a: flow.nn.GroupNorm(a, num_groups=groups, eps=1e-3, affine=affine),
          lambda t: F.group_norm(t, groups, eps=1e-3), [x], dtype, atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("rank", [3, 4, 5])
def test_instance_norm(dtype, rank):
    norm = {3: flow.nn.InstanceNorm1d, 4: flow.nn.InstanceNorm2d, 5: flow.nn.InstanceNorm3d}[rank]
    x = values(dtype, shape=(2, 3, 4, 3, 2)[:rank]) - 2.0
    check(lambda a: norm(a, eps=1e-4), lambda t: F.instance_norm(t, eps=1e-4), [x], dtype,
          atol=1e-5 if dtype is flow.float32 else None)  # fmt: skip


@pytest.mark.parametrize("dtype", FLOATS)
def test_a_constant_group_normalizes_to_0_with_a_finite_gradient(dtype):
    """Variance 0: the group's output is exactly beta (0), its gradient finite and PyTorch's.

    PyTorch in float64: its float32 kernel leaves a variance of a few units in the last place
    there (7.6e-6 out of 0.75's group), where the mean of squared deviations is exactly 0.
    """
    x = values(dtype, shape=(2, 4, 2, 4))
    x[0, :2] = 0.75  # sample 0's first group of 2 channels: 16 equal entries, their mean exact
    x[1, 3] = -2.0  # sample 1's last channel, for the instance norm
    # float32: the constant group's gradient is 1/sqrt(eps) ~ 316 times dy, and its small entries keep
    # float32's rounding of those (~316 x 6e-8 = 2e-5): an absolute tolerance at that scale
    (out,), (grad,) = check(lambda a: flow.nn.GroupNorm(a, 2), lambda t: F.group_norm(t, 2, eps=1e-5), [x], dtype,
                            oracle_dtype=torch.float64, grad_atol=1e-4 if dtype is flow.float32 else None)  # fmt: skip
    assert (out[0, :2] == 0).all() and np.isfinite(grad).all()
    (out,), (grad,) = check(flow.nn.InstanceNorm2d, lambda t: F.instance_norm(t, eps=1e-5), [x], dtype,
                            oracle_dtype=torch.float64)  # fmt: skip
    assert (out[1, 3] == 0).all() and (out[0, :2] == 0).all() and np.isfinite(grad).all()


def torch_pixel_shuffle(t, h, w):
    """(B, C*h*w, H, W) -> (B, C, H*h, W*w) written out: channel c*h*w + i*w + j to pixel (y*h + i, x*w + j)."""
    b, c, height, width = t.shape
    blocks = t.reshape(b, c // (h * w), h, w, height, width)
    return blocks.permute(0, 1, 4, 2, 5, 3).reshape(b, c // (h * w), height * h, width * w)


@pytest.mark.parametrize("dtype", FLOATS)
def test_pixel_shuffle(dtype):
    x = values(dtype, shape=(2, 18, 3, 4))
    check(lambda a: flow.nn.PixelShuffle(a, 3), lambda t: F.pixel_shuffle(t, 3), [x], dtype)
    check(lambda a: flow.nn.PixelShuffle(a, upscale_factor=1), lambda t: t, [x], dtype)
    check(lambda a: flow.nn.PixelShufflev2(a, 3, 3), lambda t: F.pixel_shuffle(t, 3), [x], dtype)
    check(lambda a: flow.nn.PixelShufflev2(a, h_upscale_factor=2, w_upscale_factor=3),
          lambda t: torch_pixel_shuffle(t, 2, 3), [x], dtype)  # fmt: skip


def test_pixel_shufflev2_is_oneflows_example_and_takes_integers():
    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((3, 16, 2, 4), dtype=flow.int32)) -> tp.Numpy:
        return flow.nn.PixelShufflev2(x, h_upscale_factor=2, w_upscale_factor=4)

    x = np.arange(3 * 16 * 2 * 4, dtype=np.int32).reshape(3, 16, 2, 4)
    out = job(x)
    assert out.shape == (3, 2, 4, 16) and out.dtype == np.int32
    np.testing.assert_array_equal(out, torch_pixel_shuffle(torch.tensor(x), 2, 4).numpy())


def test_a_list_batch_smaller_than_its_placeholder():
    """The reshapes keep axis 0 as the batch, so a dynamic batch of 3 rows of a 4-row placeholder passes through."""

    @flow.global_function()
    def job(x: tp.ListNumpy.Placeholder((4, 8, 3, 2))) -> tp.ListNumpy:
        return flow.nn.PixelShuffle(flow.nn.GroupNorm(x, 4), 2)

    x = values(flow.float32, shape=(3, 8, 3, 2))
    (out,) = job([x])
    want = F.pixel_shuffle(F.group_norm(torch.tensor(x), 4), 2).numpy()
    np.testing.assert_allclose(out, want, **tol(flow.float32, 1e-5))


def test_variables_are_named_and_shaped_as_oneflows():
    """`<name>_gamma` (ones) and `<name>_beta` (zeros) of (1, C, 1); InstanceNorm2d/3d keep their own prefix."""

    @flow.global_function()
    def job(x: tp.Numpy.Placeholder((2, 4, 3, 2, 2))) -> tp.Numpy:
        a = flow.nn.GroupNorm(x, num_groups=2)
        b = flow.nn.InstanceNorm3d(a, name="in3")
        c = flow.nn.InstanceNorm2d(flow.reshape(b, (2, 4, 6, 2)))
        d = flow.nn.InstanceNorm1d(flow.reshape(c, (2, 4, 12)), affine=False)
        return flow.nn.GroupNorm(d, num_groups=4, affine=False)

    job(np.ones((2, 4, 3, 2, 2), np.float32))
    got = {name: v.numpy() for name, v in flow.get_all_variables().items()}
    assert sorted(got) == ["GroupNorm_0_beta", "GroupNorm_0_gamma", "InstanceNorm2D_0_beta", "InstanceNorm2D_0_gamma",
                           "in3_beta", "in3_gamma"]  # fmt: skip
    for name, value in got.items():
        assert value.shape == (1, 4, 1) and value.dtype == np.float32
        np.testing.assert_array_equal(value, 1.0 if name.endswith("gamma") else 0.0)


BATCH, CHANNELS, HEIGHT, WIDTH = 4, 8, 3, 2


def irflow_steps(dtype, devices, batches):
    """The model below in a train job, 3 momentum-SGD steps: (losses, variables)."""
    if devices > 1:
        flow.config.cpu_device_num(devices)
    image = tp.Numpy.Placeholder((BATCH, CHANNELS, HEIGHT, WIDTH), dtype=dtype)
    target = tp.Numpy.Placeholder((BATCH, CHANNELS // 4, HEIGHT * 2, WIDTH * 2), dtype=dtype)

    @flow.global_function(type="train")
    def train(x: image, y: target) -> tp.Numpy:
        w = flow.get_variable("w", shape=(CHANNELS, HEIGHT, WIDTH), dtype=dtype)
        h = flow.nn.GroupNorm(x.with_distribute(flow.distribute.split(0)) * w, num_groups=4, eps=1e-3, name="gn")
        h = flow.nn.InstanceNorm2d(flow.math.tanh(h), eps=1e-4, name="in")
        loss = flow.math.reduce_mean(flow.math.square(flow.nn.PixelShuffle(h, 2) - y))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [0.5]), momentum=0.9).minimize(loss)
        return loss

    flow.load_variables({"w": batches[0][0][0].copy()})
    losses = [train(x, y) for x, y in batches]
    return losses, {name: v.numpy() for name, v in flow.get_all_variables().items()}


def torch_steps(batches):
    """The same model in PyTorch (float64), gamma and beta as OneFlow's (1, C, 1) variables."""
    w = torch.nn.Parameter(torch.tensor(batches[0][0][0], dtype=torch.float64))
    params = {name: torch.nn.Parameter(torch.full((1, CHANNELS, 1), value, dtype=torch.float64))
              for name, value in (("gn_gamma", 1.0), ("gn_beta", 0.0), ("in_gamma", 1.0), ("in_beta", 0.0))}  # fmt: skip
    opt = torch.optim.SGD([w, *params.values()], lr=0.5, momentum=0.9)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        p = {name: t.reshape(-1) for name, t in params.items()}
        h = F.group_norm(torch.tensor(x, dtype=torch.float64) * w, 4, p["gn_gamma"], p["gn_beta"], eps=1e-3)
        h = F.instance_norm(torch.tanh(h), weight=p["in_gamma"], bias=p["in_beta"], eps=1e-4)
        loss = ((F.pixel_shuffle(h, 2) - torch.tensor(y, dtype=torch.float64)) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {"w": w, **params}


def batches(dtype):
    data = np.random.default_rng(5)
    shapes = [(BATCH, CHANNELS, HEIGHT, WIDTH), (BATCH, CHANNELS // 4, HEIGHT * 2, WIDTH * 2)]
    return [[(data.normal(size=s) * 2 + 1).astype(dtype.np_dtype) for s in shapes] for _ in range(3)]


def assert_trained_as_pytorch(dtype, losses, variables, data):
    want_losses, want = torch_steps(data)
    close = tol(dtype, 1e-5 if dtype is flow.float32 else None)
    np.testing.assert_allclose(losses, want_losses, **close)
    assert set(variables) == {*want, *(f"{name}-momentum" for name in want), "System-Train-TrainStep"}
    for name, tensor in want.items():
        np.testing.assert_allclose(variables[name], tensor.detach().numpy(), **close, err_msg=name)
    assert not np.allclose(variables["gn_gamma"], 1.0) and not np.allclose(variables["in_beta"], 0.0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_training_steps_match_pytorch(dtype):
    data = batches(dtype)
    assert_trained_as_pytorch(dtype, *irflow_steps(dtype, 1, data), data)


def test_two_devices_match_one_device_and_pytorch():
    data = batches(flow.float32)
    one_losses, one = irflow_steps(flow.float32, 1, data)
    flow.clear_default_session()
    two_losses, two = irflow_steps(flow.float32, 2, data)
    assert_trained_as_pytorch(flow.float32, two_losses, two, data)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)
    for name, value in one.items():
        np.testing.assert_allclose(two[name], value, rtol=1e-5, atol=1e-6, err_msg=name)


BAD = [
    (lambda x, v, i: flow.nn.GroupNorm(x, num_groups=4), "GroupNorm: num_groups must be a positive int that divides "
     "the 6 channels, got 4"),
    (lambda x, v, i: flow.nn.GroupNorm(x, 0), "GroupNorm: num_groups must be a positive int .* got 0"),
    (lambda x, v, i: flow.nn.GroupNorm(x[:, :, 0, 0], 2), r"GroupNorm: x must be \(N, C, ...\) of rank >= 3, got "
     r"shape \(2, 6\)"),
    (lambda x, v, i: flow.nn.GroupNorm(i, 2), "GroupNorm: x must be a floating-point Blob"),
    (lambda x, v, i: flow.nn.GroupNorm(x, 2, eps=-1.0), "GroupNorm: eps must be >= 0, got -1.0"),
    (lambda x, v, i: flow.nn.GroupNorm(x, 2, affine="yes"), "GroupNorm: affine must be a bool, got 'yes'"),
    (lambda x, v, i: flow.nn.InstanceNorm1d(x), r"InstanceNorm1d: x must be rank 3 \(NCL\), got shape \(2, 6, 2, 2\)"),
    (lambda x, v, i: flow.nn.InstanceNorm2d(v), r"InstanceNorm2d: x must be rank 4 \(NCHW\), got shape \(2, 6, 4\)"),
    (lambda x, v, i: flow.nn.InstanceNorm3d(x), r"InstanceNorm3d: x must be rank 5 \(NCDHW\)"),
    (lambda x, v, i: flow.nn.InstanceNorm2d(x, eps=None), "InstanceNorm2d: eps must be a number, got None"),
    (lambda x, v, i: flow.nn.PixelShuffle(x, 2), r"PixelShuffle: the 6 channels of input \(2, 6, 2, 2\) are not "
     r"divisible by the upscale factors' product 2 \* 2"),
    (lambda x, v, i: flow.nn.PixelShuffle(x, 0), "PixelShuffle: upscale factors must be positive ints, got 0 and 0"),
    (lambda x, v, i: flow.nn.PixelShuffle(x, 1.5), "PixelShuffle: upscale factors must be positive ints, got 1.5"),
    (lambda x, v, i: flow.nn.PixelShufflev2(x, 2, -3), "PixelShufflev2: upscale factors must be positive ints, got 2 "
     "and -3"),
    (lambda x, v, i: flow.nn.PixelShufflev2(v, 1, 1), r"PixelShufflev2: input must be a rank-4 Blob \(NCHW\)"),
]


@pytest.mark.parametrize("body, message", BAD)
def test_bad_arguments_are_trace_errors_at_the_users_line(body, message):
    with pytest.raises(flow.TraceError, match=message) as info:

        @flow.global_function()
        def f(x: tp.Numpy.Placeholder((2, 6, 2, 2)), v: tp.Numpy.Placeholder((2, 6, 4)),
              i: tp.Numpy.Placeholder((2, 6, 2, 2), dtype=flow.int32)) -> tp.Numpy:  # fmt: skip
            return body(x, v, i)

    assert (info.value.location.file, info.value.location.line) == (__file__, body.__code__.co_firstlineno)
