"""conv2d and its gradients by DFTs (kernels/conv_dft.py): against PyTorch, finite differences, and the cost model's choices."""

import numpy as np
import pytest

from irflow.runtime.kernels import conv_dft
from irflow.runtime.kernels.window import Window

from .test_conv import all_three, assert_rereads_and_allocates_nothing, conv_reference

# (x shape, w shape, pads (top, bottom, left, right)): uneven pads, H != W, non-square kernels, pads wider
# than the kernel (windows wholly in padding), no pads, one image, one channel.
CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1, 0, 1)),
    ((3, 4, 9, 11), (5, 4, 5, 5), (2, 1, 0, 3)),
    ((2, 2, 5, 5), (3, 2, 3, 3), (4, 4, 4, 4)),
    ((2, 3, 6, 8), (2, 3, 4, 3), (0, 0, 0, 0)),
    ((1, 5, 4, 9), (6, 5, 2, 5), (1, 0, 2, 2)),
    ((2, 1, 6, 6), (1, 1, 6, 1), (0, 3, 0, 0)),
]
IDS = ["uneven", "wide-kernel", "wide-pads", "valid", "one-image", "one-channel"]
TOLERANCE = {np.float32: 2e-6, np.float64: 1e-13}  # of the reference's largest magnitude


@pytest.fixture
def by_transforms(monkeypatch, without_in_place):
    """Every stride-1 convolution takes the transform path, whatever it costs and whatever its rows."""
    monkeypatch.setattr(conv_dft, "_ADVANTAGE", 0.0)


def attrs_of(pads) -> dict:
    return {"strides": (1, 1), "pads": pads, "dilations": (1, 1), "groups": 1}


def torch_conv(x, w, pads, dy):
    """PyTorch's y, dx and dw in float64, an oracle independent of both irflow paths."""
    torch = pytest.importorskip("torch")
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    tw = torch.tensor(w.astype(np.float64), requires_grad=True)
    top, bottom, left, right = pads
    ty = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (left, right, top, bottom)), tw)
    ty.backward(torch.tensor(dy.astype(np.float64)))
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def close(got, ref, dtype) -> None:
    scale = float(np.abs(ref).max())
    np.testing.assert_allclose(got, ref, rtol=0, atol=TOLERANCE[dtype] * scale)


@pytest.mark.parametrize("x_shape, w_shape, pads", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_three_directions_match_torch(kernel, rng, by_transforms, x_shape, w_shape, pads, dtype) -> None:
    a = attrs_of(pads)
    window = Window.from_attrs(a, w_shape[2:], x_shape[2:])
    n, c = x_shape[:2]
    for direction in ("forward", "input", "filter"):
        assert conv_dft.chosen(window, 1, n, c, w_shape[0], direction, [np.zeros(1)])
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    y_shape = (n, w_shape[0], *window.out_hw)
    dy = rng.standard_normal(y_shape).astype(dtype)
    y_ref, dx_ref, dw_ref = torch_conv(x, w, pads, dy)
    (y,) = kernel("conv2d", [x, w], [(y_shape, dtype)], **a)
    (dx,) = kernel("conv2d_grad_input", [dy, w], [(x_shape, dtype)], **a)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, dtype)], **a)
    close(y, y_ref, dtype)
    close(dx, dx_ref, dtype)
    close(dw, dw_ref, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lenet_conv2_matches_torch(kernel, rng, dtype) -> None:
    """LeNet's second convolution takes the transform path by the cost model alone."""
    x_shape, w_shape, pads = (100, 32, 14, 14), (64, 32, 5, 5), (2, 2, 2, 2)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    dy = rng.standard_normal((100, 64, 14, 14)).astype(dtype)
    y_ref, dx_ref, dw_ref = torch_conv(x, w, pads, dy)
    a = attrs_of(pads)
    close(kernel("conv2d", [x, w], [(y_ref.shape, dtype)], **a)[0], y_ref, dtype)
    close(kernel("conv2d_grad_input", [dy, w], [(x_shape, dtype)], **a)[0], dx_ref, dtype)
    close(kernel("conv2d_grad_filter", [dy, x], [(w_shape, dtype)], **a)[0], dw_ref, dtype)


@pytest.mark.parametrize("epilogue", ["bias_add", "bias_add_relu"])
@pytest.mark.parametrize("x_shape, w_shape, pads", CASES[:3], ids=IDS[:3])
def test_the_epilogue_adds_the_bias_and_applies_relu(kernel, rng, by_transforms, x_shape, w_shape, pads, epilogue) -> None:
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    bias = rng.standard_normal(w_shape[0])
    ref = conv_reference(x, w, (1, 1), pads) + bias[:, None, None]
    if epilogue == "bias_add_relu":
        ref = np.maximum(ref, 0)
    (y,) = kernel("conv2d", [x, w, bias], [(ref.shape, np.float64)], epilogue=epilogue, **attrs_of(pads))
    close(y, ref, np.float64)


def test_gradients_match_finite_differences(kernel, finite_diff, rng, by_transforms) -> None:
    x_shape, w_shape, pads = (2, 3, 5, 4), (2, 3, 3, 2), (2, 0, 1, 1)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    a = attrs_of(pads)
    y_shape = conv_reference(x, w, (1, 1), pads).shape
    dy = rng.standard_normal(y_shape)
    (dx,) = kernel("conv2d_grad_input", [dy, w], [(x_shape, np.float64)], **a)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)
    np.testing.assert_allclose(dx, finite_diff("conv2d", [x, w], 0, (y_shape, np.float64), dy, **a), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dw, finite_diff("conv2d", [x, w], 1, (y_shape, np.float64), dy, **a), rtol=1e-6, atol=1e-7)


def test_threads_split_the_batch_and_agree_with_one_thread(kernel, rng, by_transforms) -> None:
    """Two and three parts of a batch of five: the outputs of one part, up to rounding (the GEMMs' shapes differ)."""
    from irflow.runtime import threads

    x_shape, w_shape, pads = (5, 3, 6, 7), (4, 3, 3, 3), (1, 2, 1, 0)
    a = attrs_of(pads)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = conv_reference(x, w, (1, 1), pads).shape
    dy = rng.standard_normal(y_shape)

    try:
        expected = all_three(kernel, a, x, w, dy)
        for count in (2, 3):
            threads.set_cpu_thread_num(count)
            for got, want in zip(all_three(kernel, a, x, w, dy), expected, strict=True):
                close(got, want, np.float64)
    finally:
        threads.set_cpu_thread_num(None)


@pytest.mark.parametrize(
    "name, ins, out",
    [
        ("conv2d", [(4, 6, 9, 8), (5, 6, 4, 4)], (4, 5, 9, 6)),
        ("conv2d_grad_input", [(4, 5, 9, 6), (5, 6, 4, 4)], (4, 6, 9, 8)),
        ("conv2d_grad_filter", [(4, 5, 9, 6), (4, 6, 9, 8)], (5, 6, 4, 4)),
    ],
)
def test_runs_reread_their_inputs_and_allocate_nothing(build_kernel, kernel, rng, by_transforms, name, ins, out) -> None:
    """Every buffer is made at build: a run allocates no array memory, and reads the ins' current contents."""
    a = attrs_of((1, 2, 0, 1))
    assert_rereads_and_allocates_nothing(build_kernel, kernel, rng, name, ins, out, a)


SHAPES = {  # (N, C, F, H, W, k, pad): the benchmark's convolutions (benchmarks/train_step.py)
    "lenet-conv1": (100, 1, 32, 28, 28, 5, 2),
    "lenet-conv2": (100, 32, 64, 14, 14, 5, 2),
    "resnet-16-28": (100, 16, 16, 28, 28, 3, 1),
    "resnet-16-32-14": (100, 16, 32, 14, 14, 3, 1),
    "resnet-32-14": (100, 32, 32, 14, 14, 3, 1),
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_cost_model_takes_transforms_only_for_lenet_conv2(name) -> None:
    n, c, f, h, w, k, pad = SHAPES[name]
    window = Window.from_attrs({"pads": (pad,) * 4}, (k, k), (h, w))
    taken = [conv_dft.chosen(window, 1, n, c, f, d, [np.zeros(1)]) for d in ("forward", "input", "filter")]
    assert taken == [name == "lenet-conv2"] * 3


@pytest.mark.parametrize(
    "attrs, arrays",
    [
        ({"strides": (2, 2)}, [np.zeros(1)]),
        ({"dilations": (2, 1)}, [np.zeros(1)]),
        ({}, [np.zeros((4, 4))[:, ::2]]),  # an operand the transforms cannot reshape as a view
    ],
    ids=["strided", "dilated", "non-contiguous"],
)
def test_the_transforms_are_not_taken_where_they_do_not_apply(attrs, arrays) -> None:
    window = Window.from_attrs({"pads": (2, 2, 2, 2), **attrs}, (5, 5), (14, 14))
    assert not conv_dft.chosen(window, 1, 100, 32, 64, "forward", arrays)
    assert not conv_dft.chosen(Window.from_attrs({"pads": (2,) * 4}, (5, 5), (14, 14)), 2, 100, 32, 64, "forward", [np.zeros(1)])
    assert not conv_dft.chosen(Window.from_attrs({"pads": (2,) * 4}, (5, 5), (14, 14)), 1, 0, 32, 64, "filter", [np.zeros(1)])
