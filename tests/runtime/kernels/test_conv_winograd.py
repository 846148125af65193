"""conv2d and its filter gradient by Winograd F(2x2, 3x3) (kernels/conv_winograd.py), against PyTorch."""

import numpy as np
import pytest

from irflow.runtime.kernels import conv_winograd
from irflow.runtime.kernels.window import Window

from .test_conv import assert_rereads_and_allocates_nothing
from .test_conv_dft import attrs_of, close, torch_conv

# (x shape, w shape, pads): ResNet-BN's 28x28 and 14x14, odd output sizes (a padded tile grid), uneven and
# no pads, a last chunk of fewer images than the others.
CASES = [
    ((5, 16, 28, 28), (16, 16, 3, 3), (1, 1, 1, 1)),
    ((3, 32, 14, 14), (32, 32, 3, 3), (1, 1, 1, 1)),
    ((2, 4, 7, 7), (3, 4, 3, 3), (1, 1, 1, 1)),
    ((3, 5, 8, 9), (6, 5, 3, 3), (0, 2, 1, 0)),
    ((6, 3, 5, 6), (2, 3, 3, 3), (0, 0, 0, 0)),
    ((2, 3, 6, 5), (4, 3, 3, 3), (3, 2, 2, 3)),  # pads past a tile: the input lands from the second row pair on
]
IDS = ["28x28", "14x14", "odd", "uneven", "valid", "wide pads"]


@pytest.fixture
def by_winograd(monkeypatch, without_in_place):
    """Every 3x3 stride-1 convolution takes the Winograd path, whatever its channels and rows."""
    monkeypatch.setattr(conv_winograd, "_CHANNELS", {"forward": (1, 1), "filter": (1, 1)})


@pytest.mark.parametrize("x_shape, w_shape, pads", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_and_filter_gradient_match_torch(kernel, rng, by_winograd, x_shape, w_shape, pads, dtype) -> None:
    a = attrs_of(pads)
    window = Window.from_attrs(a, w_shape[2:], x_shape[2:])
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    for direction in ("forward", "filter"):
        assert conv_winograd.chosen(window, 1, x_shape[1], w_shape[0], w, direction)
    y_shape = (x_shape[0], w_shape[0], *window.out_hw)
    dy = rng.standard_normal(y_shape).astype(dtype)
    y_ref, _, dw_ref = torch_conv(x, w, pads, dy)
    (y,) = kernel("conv2d", [x, w], [(y_shape, dtype)], **a)
    close(y, y_ref, dtype)
    (dw,) = kernel("conv2d_grad_filter", [dy, x], [(w_shape, dtype)], **a)
    close(dw, dw_ref, dtype)


@pytest.mark.parametrize("epilogue", ["bias_add", "bias_add_relu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_epilogue_matches_torch(kernel, rng, by_winograd, epilogue, dtype) -> None:
    x_shape, w_shape, pads = (3, 6, 9, 7), (5, 6, 3, 3), (1, 1, 1, 1)
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    bias = rng.standard_normal(w_shape[0]).astype(dtype)
    ref, _, _ = torch_conv(x, w, pads, np.zeros((3, 5, 9, 7)))
    ref = ref + bias[:, None, None]
    if epilogue == "bias_add_relu":
        ref = np.maximum(ref, 0)
    (y,) = kernel("conv2d", [x, w, bias], [(ref.shape, dtype)], epilogue=epilogue, **attrs_of(pads))
    close(y, ref, dtype)


def test_chosen_only_where_measured_faster() -> None:
    """ResNet-BN's 3x3 convolutions from 16 channels take it forward, its 32 -> 32 ones for the filter gradient;
    8 input channels, other kernels, strides and groups do not."""
    a = attrs_of((1, 1, 1, 1))
    window = Window.from_attrs(a, (3, 3), (14, 14))
    w = np.zeros((32, 32, 3, 3))
    for c, f, forward, filter_gradient in [(32, 32, True, True), (16, 32, True, False), (12, 8, True, False), (8, 16, False, False), (16, 4, False, False)]:
        assert conv_winograd.chosen(window, 1, c, f, w, "forward") == forward
        assert conv_winograd.chosen(window, 1, c, f, w, "filter") == filter_gradient
    for direction in ("forward", "filter"):
        assert not conv_winograd.chosen(window, 2, 32, 32, w, direction)
        assert not conv_winograd.chosen(window, 1, 32, 32, w.transpose(1, 0, 2, 3), direction)
        strided = Window.from_attrs({**a, "strides": (2, 2)}, (3, 3), (14, 14))
        assert not conv_winograd.chosen(strided, 1, 32, 32, w, direction)
        wide = Window.from_attrs(attrs_of((2, 2, 2, 2)), (5, 5), (14, 14))
        assert not conv_winograd.chosen(wide, 1, 32, 32, np.zeros((32, 32, 5, 5)), direction)


@pytest.mark.parametrize("count", [1, 2])
def test_a_shorter_last_chunk_leaves_nothing_of_a_longer_one(kernel, rng, by_winograd, monkeypatch, count) -> None:
    """Chunks of 1 and 2 images and an odd output: the tiles past the edge read zeros, not the longer chunk's dy."""
    from irflow.runtime import threads

    x_shape, w_shape, pads = (3, 5, 9, 7), (4, 5, 3, 3), (1, 1, 1, 1)
    a = attrs_of(pads)
    window = Window.from_attrs(a, w_shape[2:], x_shape[2:])
    tiles = -(-window.out_hw[0] // 2) * -(-window.out_hw[1] // 2)
    monkeypatch.setattr(conv_winograd, "_CHUNK_BYTES", 2 * 16 * tiles * x_shape[1] * 8)  # two float64 images
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    dy = rng.standard_normal((x_shape[0], w_shape[0], *window.out_hw))
    y_ref, _, dw_ref = torch_conv(x, w, pads, dy)
    try:
        threads.set_cpu_thread_num(count)
        close(kernel("conv2d", [x, w], [(y_ref.shape, np.float64)], **a)[0], y_ref, np.float64)
        close(kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0], dw_ref, np.float64)
    finally:
        threads.set_cpu_thread_num(None)


@pytest.mark.parametrize("slot_per_chunk", [True, False], ids=["slot per chunk", "grouped slots"])
def test_threads_take_the_chunks_and_agree_with_one_thread(kernel, rng, by_winograd, monkeypatch, slot_per_chunk) -> None:
    """Nine one-image chunks taken by 2 and 3 threads: bit for bit one thread's outputs, the filter gradient's
    slots (one per chunk, or with little room for them one per group of chunks) added in order whoever ran them."""
    from irflow.runtime import threads
    from irflow.runtime.kernels import parallel

    x_shape, w_shape, pads = (9, 3, 7, 6), (4, 3, 3, 3), (1, 1, 0, 1)
    a = attrs_of(pads)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    y_shape = (9, 4, 7, 5)
    dy = rng.standard_normal(y_shape)
    whole = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0]  # the batch in one chunk
    monkeypatch.setattr(conv_winograd, "_CHUNK_BYTES", 1)
    if not slot_per_chunk:  # room for none: the least number of groups, of two and three chunks
        monkeypatch.setattr(parallel, "_SLOTS_BYTES", 0)
        assert [len(g) for g in parallel.reduction_groups(9, 8)] == [2, 2, 2, 3]
    try:
        expected = kernel("conv2d", [x, w], [(y_shape, np.float64)], **a)[0]
        dw = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0]
        for count in (2, 3):
            threads.set_cpu_thread_num(count)
            np.testing.assert_array_equal(kernel("conv2d", [x, w], [(y_shape, np.float64)], **a)[0], expected)
            summed = kernel("conv2d_grad_filter", [dy, x], [(w_shape, np.float64)], **a)[0]
            np.testing.assert_array_equal(summed, dw)
    finally:
        threads.set_cpu_thread_num(None)
    np.testing.assert_allclose(dw, whole, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "name, ins, out",
    [
        ("conv2d", [(6, 5, 9, 8), (4, 5, 3, 3)], (6, 4, 9, 7)),
        ("conv2d", [(6, 5, 9, 8), (4, 5, 3, 3), (4,)], (6, 4, 9, 7)),
        ("conv2d_grad_filter", [(6, 4, 9, 7), (6, 5, 9, 8)], (4, 5, 3, 3)),
    ],
)
def test_runs_reread_their_inputs_and_allocate_nothing(build_kernel, kernel, rng, by_winograd, name, ins, out) -> None:
    """Every buffer is made at build: a run allocates no array memory, and reads the ins' current contents."""
    a = attrs_of((1, 1, 0, 1)) | ({"epilogue": "bias_add_relu"} if len(ins) == 3 else {})
    assert_rereads_and_allocates_nothing(build_kernel, kernel, rng, name, ins, out, a)
