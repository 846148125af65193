"""The convolution family beyond conv2d, trained against PyTorch.

flow.nn.conv2d_transpose, torch_conv2d_transpose, conv1d, max_pool1d, avg_pool1d;
flow.layers.conv1d, upsample_2d and prelu. Each test trains a few SGD steps of a train
job in which the op takes part in the loss, and PyTorch runs the same steps from the
same values: the outputs of every step and the variables after the last must agree, so
the forward and the gradient of every trained operand are checked. The transposed
convolution's oracle is PyTorch's conv_transpose2d without padding, cropped and
zero-extended by hand to OneFlow's output_shape.
"""

import inspect
from typing import Tuple

import numpy as np
import pytest

import irflow as flow
import irflow.typing as tp

torch = pytest.importorskip("torch")  # the oracle
F = torch.nn.functional

HERE = __file__
LR = 0.05
STEPS = 3
rng = np.random.default_rng(11)


def normal(*shape):
    return rng.normal(size=shape).astype(np.float32)


def train_like_torch(ours, theirs, data, params, devices=1, atol=1e-5):
    """STEPS of SGD on mean(out**2) in irflow and in PyTorch; returns irflow's outputs, step by step.

    `ours(data_blobs, variables)` and `theirs(data_tensors, parameters)` build the output from
    the placeholders `data` (split over `devices` along axis 0) and the variables `params`.
    """
    if devices > 1:
        flow.config.cpu_device_num(devices)

    def job(xs):
        blobs = [x.with_distribute(flow.distribute.split(0)) for x in xs]
        variables = {k: flow.get_variable(k, shape=v.shape, dtype=flow.float32) for k, v in params.items()}
        out = ours(blobs, variables)
        loss = flow.math.reduce_mean(flow.math.square(out))
        flow.optimizer.SGD(flow.optimizer.PiecewiseConstantScheduler([], [LR]), momentum=0).minimize(loss)
        return out

    placeholders = Tuple[tuple(tp.Numpy.Placeholder(a.shape) for a in data)]
    job.__annotations__ = {"xs": placeholders, "return": tp.Numpy}
    train = flow.global_function(type="train")(job)
    flow.load_variables(params)
    outs = [train(tuple(data)) for _ in range(STEPS)]

    tensors = [torch.tensor(a) for a in data]
    weights = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    sgd = torch.optim.SGD(weights.values(), lr=LR)
    for step in range(STEPS):
        sgd.zero_grad()
        out = theirs(tensors, weights)
        np.testing.assert_allclose(outs[step], out.detach().numpy(), rtol=1e-4, atol=atol, err_msg=f"step {step}")
        out.square().mean().backward()
        sgd.step()
    final = flow.get_all_variables()
    for k, v in weights.items():
        np.testing.assert_allclose(final[k].numpy(), v.detach().numpy(), rtol=1e-4, atol=atol, err_msg=k)
    return outs


# ------------------------------------------------------------------ conv2d_transpose


def same_crop(size, out, kernel, stride, dilation=1):
    """OneFlow's SAME for a transposed convolution: (size-1)*stride + extent - out rows cut, the odd one at the end."""
    needed = max(0, (size - 1) * stride + (kernel - 1) * dilation + 1 - out)
    return needed // 2


def transposed_oracle(x, w, stride, dilation, out_hw, tops):
    """PyTorch's full transposed convolution, zero-extended, then rows [top, top + out) of each spatial axis."""
    full = F.conv_transpose2d(x, w, stride=stride, dilation=dilation)
    extra = [max(0, t + o - s) for t, o, s in zip(tops, out_hw, full.shape[2:])]
    full = F.pad(full, (0, extra[1], 0, extra[0]))
    return full[:, :, tops[0] : tops[0] + out_hw[0], tops[1] : tops[1] + out_hw[1]]


# in (h, w), kernel (kh, kw), strides, padding, output (h, w), dilation, the oracle's rows cut at the start
TRANSPOSE_CASES = [
    ((4, 5), (3, 3), 2, "VALID", (9, 11), 1, (0, 0)),
    ((4, 5), (3, 2), 2, "VALID", (10, 11), 1, (0, 0)),  # one row that conv2d never reads (OneFlow's output_padding)
    ((4, 5), (3, 3), 2, "SAME", (8, 10), 1, (same_crop(4, 8, 3, 2), same_crop(5, 10, 3, 2))),  # an odd cut
    ((4, 5), (4, 4), 2, "SAME", (7, 9), 1, (same_crop(4, 7, 4, 2), same_crop(5, 9, 4, 2))),
    ((5, 5), (3, 3), 1, "SAME", (5, 5), 1, (1, 1)),
    ((4, 4), (3, 3), [1, 2], [0, 0, [2, 1], 1], (3, 8), 1, (2, 1)),  # explicit pads (irflow's extension)
    ((4, 4), (3, 3), 1, "VALID", (8, 8), 2, (0, 0)),
]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv2d_transpose_trains_as_pytorch(fmt, case):
    size, kernel, strides, padding, out_hw, dilation, tops = case
    x, w = normal(2, 3, *size), normal(3, 4, *kernel) * 0.3  # weight (in, out, kh, kw), as OneFlow's
    s = (strides, strides) if isinstance(strides, int) else tuple(strides)
    last = fmt == "NHWC"
    if last:
        padding = padding if isinstance(padding, str) else [padding[0], padding[2], padding[3], padding[1]]
    to_fmt = (lambda a: a.transpose(0, 2, 3, 1).copy()) if last else (lambda a: a)
    shape = (2, *out_hw, 4) if last else (2, 4, *out_hw)

    def ours(data, v):
        return flow.nn.conv2d_transpose(data[0] + v["x"], v["w"], output_shape=shape, strides=strides,
                                        padding=padding, data_format=fmt, dilations=dilation)  # fmt: skip

    def theirs(data, v):
        x_, w_ = data[0] + v["x"], v["w"]
        if last:
            x_, w_ = x_.permute(0, 3, 1, 2), w_.permute(0, 3, 1, 2)
        out = transposed_oracle(x_, w_, s, dilation, out_hw, tops)
        return out.permute(0, 2, 3, 1) if last else out

    outs = train_like_torch(ours, theirs, [to_fmt(x)], {"x": to_fmt(normal(2, 3, *size)), "w": to_fmt(w)})
    assert outs[0].shape == shape


# in (h, w), kernel, strides, padding_needed, output_padding, dilation
TORCH_TRANSPOSE_CASES = [
    ((4, 5), (3, 3), 2, [2, 2], [1, 1], 1),
    ((4, 4), (3, 2), 1, [0, 0], None, 1),
    ((3, 4), (3, 3), [2, 1], [2, 0], [1, 0], 2),
]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", TORCH_TRANSPOSE_CASES)
def test_torch_conv2d_transpose_trains_as_pytorchs_conv_transpose2d(fmt, case):
    size, kernel, strides, needed, extra, dilation = case
    s = (strides, strides) if isinstance(strides, int) else tuple(strides)
    last = fmt == "NHWC"
    to_fmt = (lambda a: a.transpose(0, 2, 3, 1).copy()) if last else (lambda a: a)

    def ours(data, v):
        return flow.nn.torch_conv2d_transpose(data[0] + v["x"], v["w"], output_padding=extra, strides=strides,
                                              padding_needed=needed, data_format=fmt, dilations=dilation)  # fmt: skip

    def theirs(data, v):
        x_, w_ = data[0] + v["x"], v["w"]
        if last:
            x_, w_ = x_.permute(0, 3, 1, 2), w_.permute(0, 3, 1, 2)
        out = F.conv_transpose2d(x_, w_, stride=s, padding=(needed[0] // 2, needed[1] // 2),
                                 output_padding=tuple(extra or (0, 0)), dilation=dilation)  # fmt: skip
        return out.permute(0, 2, 3, 1) if last else out

    train_like_torch(ours, theirs, [to_fmt(normal(2, 3, *size))], {"x": to_fmt(normal(2, 3, *size)),
                                                                   "w": to_fmt(normal(3, 2, *kernel) * 0.3)})  # fmt: skip


def test_conv2d_transpose_takes_oneflows_other_names_and_grows_a_dcgan_image():
    """OneFlow's documented example: 32x32 to 64x64 with SAME and stride 2, through `input=` and `filters=`."""
    x, w = normal(1, 8, 4, 4), normal(8, 2, 3, 3)

    @flow.global_function()
    def up(images: tp.Numpy.Placeholder((1, 8, 4, 4)), weight: tp.Numpy.Placeholder((8, 2, 3, 3))) -> tp.Numpy:
        return flow.nn.conv2d_transpose(input=images, filters=weight, output_shape=(1, 2, 8, 8), strides=2,
                                        padding="SAME")  # fmt: skip

    out = up(x, w)
    want = transposed_oracle(torch.tensor(x), torch.tensor(w), (2, 2), 1, (8, 8), (0, 0))
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ conv1d


def same_lower(size, kernel, stride, dilation=1):
    """OneFlow's SAME (SAME_LOWER, as its conv2d and pools): the output ceil(size / stride), the odd pad at the start."""
    total = max((-(-size // stride) - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total - total // 2, total // 2


# width, kernel, strides, padding, dilation, groups, the oracle's pads
CONV1D_CASES = [
    (9, 3, 1, "VALID", 1, 1, (0, 0)),
    (10, 3, 2, "SAME", 1, 1, same_lower(10, 3, 2)),  # an odd total: 1 before, 0 after
    (9, 3, [2], [0, 0, [2, 1]], 1, 2, (2, 1)),
    (11, 3, 1, "SAME", [2], 1, same_lower(11, 3, 1, 2)),
]


@pytest.mark.parametrize("fmt", ["NCW", "NWC"])
@pytest.mark.parametrize("case", CONV1D_CASES)
def test_conv1d_trains_as_pytorch(fmt, case):
    width, kernel, strides, padding, dilation, groups, pads = case
    last = fmt == "NWC"
    if last and not isinstance(padding, str):
        padding = [padding[0], padding[2], padding[1]]
    s = strides[0] if isinstance(strides, list) else strides
    d = dilation[0] if isinstance(dilation, list) else dilation
    to_fmt = (lambda a: a.transpose(0, 2, 1).copy()) if last else (lambda a: a)
    x, w = normal(2, 4, width), normal(6, 4 // groups, kernel) * 0.4  # weight (out, in/groups, k)

    def ours(data, v):
        return flow.nn.conv1d(data[0] + v["x"], v["w"], strides, padding, fmt, dilation, groups)

    def theirs(data, v):
        x_, w_ = data[0] + v["x"], v["w"]
        if last:
            x_, w_ = x_.permute(0, 2, 1), w_.permute(0, 2, 1)
        out = F.conv1d(F.pad(x_, pads), w_, stride=s, dilation=d, groups=groups)
        return out.permute(0, 2, 1) if last else out

    train_like_torch(ours, theirs, [to_fmt(x)], {"x": to_fmt(normal(2, 4, width)), "w": to_fmt(w)})


@pytest.mark.parametrize("fmt", ["NCW", "NWC"])
def test_conv1d_layer_names_its_variables_and_trains_as_pytorch(fmt):
    last = fmt == "NWC"
    x = normal(3, 5, 12)
    weight, bias = normal(4, 5, 3) * 0.3, normal(4)
    to_fmt = (lambda a: a.transpose(0, 2, 1).copy()) if last else (lambda a: a)

    def ours(data, v):
        return flow.layers.conv1d(data[0], 4, 3, strides=2, padding="SAME", data_format=fmt,
                                  activation=flow.math.tanh)  # fmt: skip

    def theirs(data, v):
        x_ = data[0].permute(0, 2, 1) if last else data[0]
        w_ = v["Conv1d_0-weight"].permute(0, 2, 1) if last else v["Conv1d_0-weight"]
        out = torch.tanh(F.conv1d(F.pad(x_, same_lower(12, 3, 2)), w_, v["Conv1d_0-bias"], stride=2))
        return out.permute(0, 2, 1) if last else out

    params = {"Conv1d_0-weight": to_fmt(weight), "Conv1d_0-bias": bias}
    outs = train_like_torch(ours, theirs, [to_fmt(x)], params)
    assert outs[0].shape == ((3, 6, 4) if last else (3, 4, 6))
    assert flow.get_all_variables()["Conv1d_0-weight"].numpy().shape == ((4, 3, 5) if last else (4, 5, 3))


# ------------------------------------------------------------------ pool1d


def pool1d_oracle(kind, x, kernel, stride, pads):
    """Max with -inf padding; the average over the window's in-bounds entries (padding left out of the divisor)."""
    if kind == "max":
        return F.max_pool1d(F.pad(x, pads, value=-float("inf")), kernel, stride)
    sums = F.avg_pool1d(F.pad(x, pads), kernel, stride)
    return sums / F.avg_pool1d(F.pad(torch.ones_like(x), pads), kernel, stride)


# width, ksize, strides, padding, the oracle's pads
POOL1D_CASES = [
    (8, 2, 2, "VALID", (0, 0)),
    (9, 3, 2, "SAME", same_lower(9, 3, 2)),
    (10, 3, [2], "SAME", same_lower(10, 3, 2)),  # an odd total: 1 before, 0 after
    (7, [3], 1, [0, 0, [1, 2]], (1, 2)),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("fmt", ["NCW", "NWC"])
@pytest.mark.parametrize("case", POOL1D_CASES)
def test_pool1d_trains_as_pytorch(kind, fmt, case):
    width, ksize, strides, padding, pads = case
    last = fmt == "NWC"
    if last and not isinstance(padding, str):
        padding = [padding[0], padding[2], padding[1]]
    k = ksize[0] if isinstance(ksize, list) else ksize
    s = strides[0] if isinstance(strides, list) else strides
    to_fmt = (lambda a: a.transpose(0, 2, 1).copy()) if last else (lambda a: a)
    pool = flow.nn.max_pool1d if kind == "max" else flow.nn.avg_pool1d

    def ours(data, v):
        return pool(data[0] + v["x"], ksize, strides, padding, data_format=fmt)

    def theirs(data, v):
        x_ = data[0] + v["x"]
        out = pool1d_oracle(kind, x_.permute(0, 2, 1) if last else x_, k, s, pads)
        return out.permute(0, 2, 1) if last else out

    train_like_torch(ours, theirs, [to_fmt(normal(2, 3, width))], {"x": to_fmt(normal(2, 3, width))})


def test_pool1d_default_formats_are_oneflows():
    """max_pool1d's data_format defaults to NWC and avg_pool1d's to NCW, as OneFlow 0.x declares them."""
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)

    @flow.global_function()
    def f(a: tp.Numpy.Placeholder((1, 3, 4))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.nn.max_pool1d(a, 3, 3, "VALID"), flow.nn.avg_pool1d(a, 2, 2, "VALID")

    most, mean = f(x)
    np.testing.assert_array_equal(most, x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(mean, x.reshape(1, 3, 2, 2).mean(axis=3))


# ------------------------------------------------------------------ upsample_2d


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
@pytest.mark.parametrize("size", [(2, 2), 3, (1, 2), [2.0, 3]])
@pytest.mark.parametrize("mode, align_corners", [("nearest", False), ("bilinear", False), ("bilinear", True)])
def test_upsample_2d_trains_as_pytorchs_interpolate(fmt, size, mode, align_corners):
    last = fmt == "NHWC"
    scales = (size, size) if isinstance(size, int) else tuple(int(k) for k in size)
    to_fmt = (lambda a: a.transpose(0, 2, 3, 1).copy()) if last else (lambda a: a)

    def ours(data, v):
        return flow.layers.upsample_2d(data[0] * v["x"], size, align_corners, fmt, mode)

    def theirs(data, v):
        x_ = data[0] * v["x"]
        x_ = x_.permute(0, 3, 1, 2) if last else x_
        corners = dict(align_corners=align_corners) if mode == "bilinear" else {}
        out = F.interpolate(x_, scale_factor=scales, mode=mode, **corners)
        return out.permute(0, 2, 3, 1) if last else out

    outs = train_like_torch(ours, theirs, [to_fmt(normal(2, 3, 4, 5))], {"x": to_fmt(normal(2, 3, 4, 5))})
    assert outs[0].shape == to_fmt(np.empty((2, 3, 4 * scales[0], 5 * scales[1]))).shape


# ------------------------------------------------------------------ prelu


@pytest.mark.parametrize("shared_axes", [None, [2, 3], [1]])
def test_prelu_trains_as_pytorch_with_alpha_at_zero(shared_axes):
    """alpha of inputs.shape[1:] with 1 on the shared axes; x's gradient at 0 is alpha (OneFlow's, PyTorch's)."""
    x = normal(2, 3, 4, 5)
    x[0, :, 0, :2] = 0.0  # the kink
    shape = [1 if a + 1 in (shared_axes or []) else d for a, d in enumerate(x.shape[1:])]
    alpha = np.abs(normal(*shape)) * 0.3

    def ours(data, v):
        return flow.layers.prelu(data[0] + v["shift"], shared_axes=shared_axes, name="act")

    def theirs(data, v):
        t = data[0] + v["shift"]
        if shared_axes == [2, 3]:
            return F.prelu(t, v["act-alpha"].reshape(-1))
        return torch.where(t > 0, t, v["act-alpha"] * t)

    train_like_torch(ours, theirs, [x], {"shift": np.zeros_like(x), "act-alpha": alpha})


def test_prelu_default_alpha_is_zero_and_names_count():
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 3))) -> Tuple[tp.Numpy, tp.Numpy]:
        return flow.layers.prelu(x), flow.layers.prelu(x, alpha_initializer=flow.constant_initializer(0.5))

    relu, leaky = f(np.array([[-2.0, 0.0, 3.0], [1.0, -1.0, -4.0]], np.float32))
    np.testing.assert_array_equal(relu, [[0, 0, 3], [1, 0, 0]])
    np.testing.assert_array_equal(leaky, [[-1, 0, 3], [1, -0.5, -2]])
    assert {"PRelu_0-alpha", "PRelu_1-alpha"} <= set(flow.get_all_variables())


# ------------------------------------------------------------------ many devices


def test_a_small_generator_on_two_devices_trains_as_on_one_and_as_pytorch():
    """conv1d -> conv2d_transpose -> prelu -> upsample_2d (nearest, bilinear), the batch split over 2 devices."""
    x = normal(4, 3, 8)
    params = {
        "w1": normal(4, 3, 3) * 0.4,
        "w2": normal(4, 2, 3, 3) * 0.4,  # (in, out, kh, kw)
        "act-alpha": np.full((2, 1, 1), 0.2, np.float32),
    }

    def ours(data, v):
        hidden = flow.nn.conv1d(data[0], v["w1"], 1, "SAME")  # (4, 4, 8)
        image = flow.reshape(hidden, (4, 4, 2, 4))
        up = flow.nn.conv2d_transpose(image, v["w2"], output_shape=(4, 2, 4, 8), strides=2, padding="SAME")
        near = flow.layers.upsample_2d(flow.layers.prelu(up, shared_axes=[2, 3], name="act"), 2)
        return flow.layers.upsample_2d(near, (1, 2), interpolation="bilinear")

    def theirs(data, v):
        hidden = F.conv1d(F.pad(data[0], (1, 1)), v["w1"])
        image = hidden.reshape(4, 4, 2, 4)
        up = transposed_oracle(image, v["w2"], (2, 2), 1, (4, 8), (0, 0))
        near = F.interpolate(F.prelu(up, v["act-alpha"].reshape(-1)), scale_factor=2, mode="nearest")
        return F.interpolate(near, scale_factor=(1, 2), mode="bilinear", align_corners=False)

    one = train_like_torch(ours, theirs, [x], params)
    one_variables = {k: v.numpy() for k, v in flow.get_all_variables().items() if k in params}
    flow.clear_default_session()
    two = train_like_torch(ours, theirs, [x], params, devices=2)
    for a, b in zip(one, two):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    for k, v in one_variables.items():
        np.testing.assert_allclose(flow.get_all_variables()[k].numpy(), v, rtol=1e-6, atol=1e-6)
    assert two[-1].shape == (4, 2, 8, 32)


# ------------------------------------------------------------------ errors


def trace(body):
    @flow.global_function()
    def f(x: tp.Numpy.Placeholder((2, 4, 6, 6)), w: tp.Numpy.Placeholder((4, 3, 3, 3))) -> tp.Numpy:
        return body(x, w)


@pytest.mark.parametrize(
    "body, match",
    [
        (lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 3, 15, 13), strides=2),  # the bad line
         r"output_shape \(2, 3, 15, 13\) does not fit the input \(2, 4, 6, 6\): conv2d with strides \(2, 2\) and "
         r"padding 'VALID' maps its \(15, 13\) to \(7, 6\)"),
        (lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 3, 13, 19), strides=2),  # the bad line
         r"maps its \(13, 19\) to \(6, 9\)"),
        (lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 5, 13, 13), strides=2),  # the bad line
         r"input \(2, 4, 6, 6\) and filter \(4, 3, 3, 3\) \(in, out, kh, kw\) do not give the output"),
        (lambda x, w: flow.nn.conv2d_transpose(x, w, input=x, output_shape=(2, 3, 13, 13), strides=2),  # the bad line
         "give exactly one of value and input"),
        (lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 3, 13), strides=2),  # the bad line
         r"output_shape must be four positive ints, got \(2, 3, 13\)"),
        (lambda x, w: flow.nn.conv2d_transpose(x, w, output_shape=(2, 3, 13, 13)),  # the bad line
         "strides must be an int or a list of two ints, got None"),
        (lambda x, w: flow.nn.torch_conv2d_transpose(x, w, strides=2, padding_needed=[1, 2]),  # the bad line
         r"padding_needed must be two even non-negative ints, got \[1, 2\]"),
        (lambda x, w: flow.nn.torch_conv2d_transpose(x, w, [2, 0], 2, [0, 0]),  # the bad line
         r"conv2d with strides \(2, 2\) and output_padding \[2, 0\] maps its \(15, 13\) to \(7, 6\)"),
        (lambda x, w: flow.nn.conv1d(flow.reshape(x, (2, 4, 36)), flow.reshape(w, (4, 3, 9)), [1, 1], "VALID"),  # the bad line
         r"strides must be an int or a list of one int, got \[1, 1\]"),
        (lambda x, w: flow.nn.conv1d(flow.reshape(x, (2, 4, 36)), flow.reshape(w, (4, 3, 9)), 1, "VALID", "NCHW"),  # the bad line
         "data_format must be 'NCW' or 'NWC', got 'NCHW'"),
        (lambda x, w: flow.nn.conv1d(flow.reshape(x, (2, 4, 36)), flow.reshape(w, (4, 3, 9)), 1, [0, 1]),  # the bad line
         r"padding must be a string or one pad per axis \(3 entries\), got \[0, 1\]"),
        (lambda x, w: flow.nn.conv1d(flow.reshape(x, (2, 4, 36)), flow.reshape(w, (4, 3, 9)), 1, "VALID"),  # the bad line
         "flow.nn.conv1d: conv2d: input has 4 channels, weight expects 3 per group"),
        (lambda x, w: flow.nn.max_pool1d(x, 2, 2, "VALID"),  # the bad line
         "flow.nn.max_pool1d: input must be a rank-3 Blob"),
        (lambda x, w: flow.nn.avg_pool1d(flow.reshape(x, (2, 4, 36)), (2, 2), 2, "VALID"),  # the bad line
         r"ksize must be an int or a list of one int, got \(2, 2\)"),
        (lambda x, w: flow.layers.conv1d(x, 4, 3),  # the bad line
         "inputs must be a rank-3 Blob"),
        (lambda x, w: flow.layers.upsample_2d(x, 1.5),  # the bad line
         "size must be a whole number >= 1 or a pair of them, got 1.5"),
        (lambda x, w: flow.layers.upsample_2d(x, interpolation="bicubic"),  # the bad line
         "interpolation must be 'nearest' or 'bilinear', got 'bicubic'"),
        (lambda x, w: flow.layers.upsample_2d(x, align_corners=True),  # the bad line
         "interpolation 'nearest' does not take align_corners"),
        (lambda x, w: flow.layers.upsample_2d(x, data_format="NCW"),  # the bad line
         "data_format must be 'NCHW' or 'NHWC', got 'NCW'"),
        (lambda x, w: flow.nn.conv2d(x, w, 0, "SAME"),  # the bad line
         r"flow.nn.conv2d: strides must be positive, got \[0, 0\]"),
        (lambda x, w: flow.nn.max_pool2d(x, 2, [1, 0], "SAME"),  # the bad line
         r"flow.nn.max_pool2d: strides must be positive, got \[1, 0\]"),
        (lambda x, w: flow.layers.prelu(x, shared_axes=[0]),  # the bad line
         r"shared_axes must be a list of axes in \[1, 4\), got \[0\]"),
    ],
)
def test_bad_arguments_fail_at_the_users_line(body, match):
    with pytest.raises(flow.TraceError, match=match) as err:
        trace(body)
    assert err.value.location.file == HERE
    assert err.value.location.line in lines_of("# the bad line")


def lines_of(marker: str) -> set[int]:
    source = inspect.getsource(inspect.getmodule(lines_of)).splitlines()
    return {i for i, text in enumerate(source, 1) if text.endswith(marker)}
